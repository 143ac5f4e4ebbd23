import { z } from 'zod';
import {
  browserEvent,
  browserPageParams,
  browserParams,
  browserStatus,
  clickBody,
  evaluateBody,
  evaluation,
  eventsQuery,
  fillBody,
  gotoBody,
  pageClosed,
  pageContent,
  pageSnapshot,
  pageSummary,
  screenshot,
} from '../../schemas/browser-schemas.js';
import { errors, type App, type RouteContext } from '../route-types.js';
import { onSandbox, type RouteAction } from '../route-actions.js';

const tags = ['browser'];
/** Errors of every route that drives the browser: bad input, unknown sandbox or page, stopped sandbox, no Chromium. */
const browserErrors = () => errors(400, 404, 409, 422);

/** Browser automation in running sandboxes; replies are bare bodies (docs/decisions.md, "Transport"), not enveloped. */
export async function browserRoutes(app: App, { services }: RouteContext): Promise<void> {
  const browser = services.browser;
  const page = '/sandboxes/:name/browser/pages/:page';

  app.post(
    '/sandboxes/:name/browser/start',
    {
      schema: { tags, summary: 'Start the in-sandbox browser (any browser call does so too)', params: browserParams, response: { 200: browserStatus, ...browserErrors() } },
    },
    async (request) => browser.start(request.params.name),
  );

  app.get(
    '/sandboxes/:name/browser/pages',
    { schema: { tags, summary: 'List open pages', params: browserParams, response: { 200: z.array(pageSummary), ...browserErrors() } } },
    async (request) => browser.pages(request.params.name),
  );

  app.post(
    `${page}/goto`,
    {
      schema: {
        tags,
        summary: 'Navigate a page (opened under this name if needed); its snapshot',
        params: browserPageParams,
        body: gotoBody,
        response: { 200: pageSnapshot, ...browserErrors() },
      },
    },
    async (request) => browser.goto(request.params.name, request.params.page, request.body.url),
  );

  app.get(
    page,
    { schema: { tags, summary: 'Current snapshot of a page, without navigating', params: browserPageParams, response: { 200: pageSnapshot, ...browserErrors() } } },
    async (request) => browser.snapshot(request.params.name, request.params.page),
  );

  app.post(
    `${page}/click`,
    {
      schema: { tags, summary: 'Click by ref (or CSS selector); the new snapshot', params: browserPageParams, body: clickBody, response: { 200: pageSnapshot, ...browserErrors() } },
    },
    async (request) => browser.click(request.params.name, request.params.page, request.body),
  );

  app.post(
    `${page}/fill`,
    {
      schema: { tags, summary: 'Fill an input by ref (or CSS selector); the new snapshot', params: browserPageParams, body: fillBody, response: { 200: pageSnapshot, ...browserErrors() } },
    },
    async (request) => browser.fill(request.params.name, request.params.page, request.body.value, request.body),
  );

  app.get(
    `${page}/screenshot`,
    { schema: { tags, summary: 'Screenshot of the viewport, PNG as base64', params: browserPageParams, response: { 200: screenshot, ...browserErrors() } } },
    async (request) => browser.screenshot(request.params.name, request.params.page),
  );

  app.post(
    `${page}/evaluate`,
    {
      schema: { tags, summary: 'Evaluate a JavaScript expression in the page', params: browserPageParams, body: evaluateBody, response: { 200: evaluation, ...browserErrors() } },
    },
    async (request) => browser.evaluate(request.params.name, request.params.page, request.body.expression),
  );

  app.get(
    `${page}/content`,
    { schema: { tags, summary: 'Raw content of a page: title, text and links', params: browserPageParams, response: { 200: pageContent, ...browserErrors() } } },
    async (request) => browser.content(request.params.name, request.params.page),
  );

  app.delete(
    page,
    { schema: { tags, summary: 'Close a page', params: browserPageParams, response: { 200: pageClosed, ...browserErrors() } } },
    async (request) => browser.closePage(request.params.name, request.params.page),
  );

  app.get(
    '/sandboxes/:name/browser/events',
    {
      schema: {
        tags,
        summary: 'Browser event log from sequence number offset (default 0), at most limit (default 100)',
        params: browserParams,
        querystring: eventsQuery,
        response: { 200: z.array(browserEvent), ...errors(400, 404) },
      },
    },
    async (request) => browser.eventLog(request.params.name, request.query.offset, request.query.limit),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const browserRouteActions: Record<string, RouteAction | 'open'> = {
  'POST /sandboxes/:name/browser/start': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages/:page': onSandbox('sandbox.browser'),
  'DELETE /sandboxes/:name/browser/pages/:page': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/events': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/goto': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/click': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/fill': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages/:page/screenshot': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/evaluate': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages/:page/content': onSandbox('sandbox.browser'),
};
