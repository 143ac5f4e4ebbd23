/**
 * Preview URLs: traffic to a port inside a sandbox (`PreviewService`) and the signed grants
 * that let a URL work without the API key (`PreviewSigner`).
 */
export { parsePort, PreviewService, type PreviewOrigin, type PreviewTarget } from './preview-service.js';
export { PreviewSigner, type GrantCheck } from './preview-signing.js';
