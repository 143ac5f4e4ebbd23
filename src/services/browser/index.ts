/**
 * Browser automation in a sandbox: Chromium started through the backend (`browser-launch.ts`),
 * one Playwright connection per sandbox (`browser-sessions.ts`), and the routes' operations
 * (`BrowserService`).
 */
export { BrowserService } from './browser-service.js';
