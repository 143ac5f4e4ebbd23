/** Interactive terminals in sandboxes (`TerminalService`). */
export { TerminalService, type Terminal } from './terminal-service.js';
