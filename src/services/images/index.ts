/** Images built from a Dockerfile through the engine (`ImageService`). */
export { ImageService, MAX_CONTEXT_BYTES } from './image-service.js';
