import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../../paths.js';
import type { ObjectRuntime } from '../../../state/object-repository.js';

/** Where everything of the objects lives inside a sandbox. */
export const OBJECTS_DIR = '/workspace/.sandboxd/objects';

/** A runtime's runner script: its text and where it is written in a sandbox (named by its hash). */
export interface RunnerAsset {
  runtime: ObjectRuntime;
  text: string;
  path: string;
  /** The interpreter command that runs it (argv without the script). */
  interpreter: string[];
  /** The module file name of a class version. */
  module: string;
}

const FILES: Record<ObjectRuntime, { file: string; interpreter: string[]; module: string }> = {
  node: { file: 'runner.mjs', interpreter: ['node'], module: 'index.mjs' },
  python: { file: 'runner.py', interpreter: ['python3', '-u'], module: 'index.py' },
};

const cache = new Map<ObjectRuntime, RunnerAsset>();

/** The runner of `runtime`, read once from the package (src/services/durable/objects/runner/). */
export function runnerAsset(runtime: ObjectRuntime): RunnerAsset {
  let asset = cache.get(runtime);
  if (!asset) {
    const { file, interpreter, module } = FILES[runtime];
    const text = readFileSync(join(PACKAGE_ROOT, 'src', 'services', 'durable', 'objects', 'runner', file), 'utf8');
    const hash = createHash('sha256').update(text).digest('hex').slice(0, 12);
    const [base, extension] = file.split('.') as [string, string];
    asset = { runtime, text, path: `${OBJECTS_DIR}/${base}-${hash}.${extension}`, interpreter, module };
    cache.set(runtime, asset);
  }
  return asset;
}

/** The folder of a class (where `setup` runs and bare imports resolve) and of one of its versions. */
export function classDir(className: string): string {
  return `${OBJECTS_DIR}/${className}`;
}

export function versionDir(className: string, version: number): string {
  return `${classDir(className)}/v${version}`;
}
