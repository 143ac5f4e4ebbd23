/**
 * Durable objects: registered classes (node or python modules, versioned), objects with their
 * storage and alarm on the host, calls run in the object's sandbox by a persistent worker,
 * alarms and hibernation driven by the durable timers.
 */
export { ObjectClasses, RUNTIME_IMAGES, moduleOfHandlers, type DefinedClass } from './object-classes.js';
export { ObjectService, MAX_QUEUED_CALLS, nameOf, type CallOutcome, type CallRequest } from './object-service.js';
export { ObjectAlarms, ObjectHibernation, ALARM_RETRIES } from './object-timers.js';
export { ObjectRuntime, OBJECT_LABEL, OBJECT_CLASS_LABEL } from './object-runtime.js';
