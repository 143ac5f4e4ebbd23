#!/usr/bin/env node
import { Command } from 'commander';
import { VERSION } from '../paths.js';
import { registerImagesCommand } from './images-command.js';
import { mcpCommand } from './mcp-command.js';
import { serveCommand } from './serve-command.js';

const program = new Command('sandboxd')
  .description('isolated sandboxes for untrusted commands: HTTP/JSON API, MCP tool server, CLI')
  .version(VERSION);
program.addCommand(serveCommand());
program.addCommand(mcpCommand());
registerImagesCommand(program);

await program.parseAsync(process.argv);
