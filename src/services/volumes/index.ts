/** Named volumes that sandboxes mount (`VolumeService`, `checkMounts`). */
export { checkMounts, VolumeService } from './volume-service.js';
