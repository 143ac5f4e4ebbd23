/**
 * Governance: who may do what. The policy service decides every request from rules in a file
 * (hot reloaded, audit mode, an audit ring); the permission service keeps the grants an admin
 * gives. Principals (API keys with names, admin flags and labels) are in domain/principals.ts.
 */
export { ACTIONS, type Action } from './actions.js';
export { PermissionService, type Grant, type GrantInput, type GrantScope } from './permission-service.js';
export { PolicyService, type PolicyCheckInput, type PolicyDecision } from './policy-service.js';
export { compilePolicy, factsOf, matchRules, PolicyFileError, type RequestContext } from './policy-rules.js';
