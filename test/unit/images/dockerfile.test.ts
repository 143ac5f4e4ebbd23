import { describe, expect, it } from 'vitest';
import { dockerfileImages, instructions, labelStages, triggerProblem } from '../../../src/images/dockerfile.js';

const BASE = 'sandboxd/base:bookworm';
const REGISTRY = '127.0.0.1:5999/x:1';
const read = (lines: string[]) => dockerfileImages(lines.join('\n'));
const refused = (lines: string[]) => {
  try {
    read(lines);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`not refused: ${lines.join(' | ')}`);
};

describe('reading a Dockerfile as the engine does', () => {
  it('lists every image a build reads, with its line, but scratch and earlier stages', () => {
    expect(
      read([
        '# a comment naming FROM nothing',
        `FROM ${BASE} AS build`,
        'RUN make \\',
        '  FROM-looking-arg',
        'from build as test',
        'COPY --from=build /a /b',
        'COPY --from=0 /a /b',
        'FROM scratch',
        `COPY --from=${REGISTRY} /a /b`,
        `RUN --mount=type=bind,from=${REGISTRY},target=/m true`,
        'FROM sandboxd/node:bookworm',
      ]),
    ).toEqual([
      { line: 2, instruction: `FROM ${BASE}`, image: BASE },
      { line: 9, instruction: `COPY --from=${REGISTRY}`, image: REGISTRY },
      { line: 10, instruction: `RUN --mount=from=${REGISTRY}`, image: REGISTRY },
      { line: 11, instruction: 'FROM sandboxd/node:bookworm', image: 'sandboxd/node:bookworm' },
    ]);
  });

  it('applies the escape directive: a backslash then continues nothing, so a FROM after it is seen', () => {
    const lines = ['# escape=`', `FROM ${BASE}`, 'RUN echo hidden \\', `FROM ${REGISTRY}`];
    expect(read(lines).map((i) => [i.line, i.image])).toEqual([
      [2, BASE],
      [4, REGISTRY],
    ]);
    // And the backtick continues a line: the FROM-looking words are RUN's.
    expect(read(['# escape=`', `FROM ${BASE}`, 'RUN echo `', `  FROM ${REGISTRY}`]).map((i) => i.image)).toEqual([BASE]);
    expect(instructions(['#escape = `', 'FROM a', 'RUN x `', '# a comment inside', '', '  y'].join('\r\n')).list).toEqual([
      { line: 2, end: 2, keyword: 'FROM', rest: 'a' },
      { line: 3, end: 6, keyword: 'RUN', rest: 'x   y' },
    ]);
  });

  it('reads directives only at the top: a later escape line is a comment, one after another directive is refused', () => {
    expect(read([`FROM ${BASE}`, '# escape=`', 'RUN echo \\', `  FROM ${REGISTRY}`]).map((i) => i.image)).toEqual([BASE]);
    expect(read(['', '# escape=`', `FROM ${BASE}`, 'RUN echo \\', `  FROM ${REGISTRY}`]).map((i) => i.image)).toEqual([BASE]);
    expect(refused(['# syntax=docker/dockerfile:1', '# escape=`', `FROM ${BASE}`])).toMatch(/^line 2: the escape directive must be the first line/);
    expect(refused(['# escape=`', '# escape=\\', `FROM ${BASE}`])).toMatch(/^line 2: only one escape parser directive/);
    expect(refused(['# escape=x', `FROM ${BASE}`])).toMatch(/^line 1: invalid escape character 'x'/);
  });

  it('expands meta ARGs in FROM with their defaults, as the engine does with no build-args', () => {
    const lines = [`ARG REG=127.0.0.1:5999`, 'ARG IMG="${REG}/x:1"', 'ARG UNSET', 'FROM ${IMG}', `FROM \${UNSET:-${BASE}}`, 'FROM ${UNSET:+nothing}scratch'];
    expect(read(lines).map((i) => [i.line, i.image])).toEqual([
      [4, REGISTRY],
      [5, BASE],
    ]);
    expect(refused(['ARG B', 'FROM $B'])).toMatch(/^line 2: FROM \$B: names no image/);
    expect(refused(['ARG B=x', 'FROM ${B%%y}'])).toMatch(/^line 2: FROM: \$\{B%%y\}: only/);
  });

  it('takes a stage by name only after it ended, and by index only for an earlier one', () => {
    // The engine reads the current stage's own name, a later stage and an index not yet built as images.
    expect(read([`FROM ${BASE} AS a`, 'COPY --from=a /x /y']).map((i) => i.image)).toEqual([BASE, 'a']);
    expect(read([`FROM ${BASE}`, 'COPY --from=0 /x /y']).map((i) => i.image)).toEqual([BASE, '0']);
    expect(read([`FROM later`, `FROM ${BASE} AS later`]).map((i) => i.image)).toEqual(['later', BASE]);
    expect(read([`FROM ${BASE} AS A`, 'FROM a', 'COPY --from=A /x /y']).map((i) => i.image)).toEqual([BASE]);
  });

  it('refuses what would fetch, naming the line', () => {
    const cases: Array<[string[], RegExp]> = [
      [[`FROM ${BASE}`, 'ADD http://127.0.0.1:5999/f /f'], /^line 2: ADD http:\/\/127\.0\.0\.1:5999\/f: builds fetch nothing/],
      [[`FROM ${BASE}`, 'add ["https://example.com/f", "/f"]'], /^line 2: ADD https:\/\/example\.com\/f/],
      [[`FROM ${BASE}`, 'ADD http\\://127.0.0.1:5999/f /f'], /^line 2: ADD http:\/\/127/],
      [[`FROM ${BASE}`, 'ADD git@github.com:a/b.git /src'], /^line 2: ADD git@/],
      [[`FROM ${BASE}`, 'ARG U=http://127.0.0.1:5999/f', 'ADD $U /f'], /^line 3: ADD with a variable/],
      [[`FROM --platform=linux/arm64 ${BASE}`], /^line 1: FROM --platform: FROM takes no flags/],
      [[`FROM ${BASE}`, 'RUN --network=host true'], /^line 2: RUN --network: build steps run with no network/],
      [[`FROM ${BASE}`, 'RUN <<EOF', `FROM ${BASE}`, 'EOF'], /^line 2: RUN with a heredoc/],
      [[`FROM ${BASE}`, 'COPY <<-"EOT" /f'], /^line 2: COPY with a heredoc/],
      [[`FROM ${BASE}`, 'ARG R=x', 'COPY --from=$R /a /b'], /^line 3: COPY --from=\$R: name the stage or image itself/],
      [[`FROM ${BASE}`, `ONBUILD COPY --from=${BASE} /a /b`], /^line 2: ONBUILD COPY --from/],
      [[`FROM ${BASE}`, `onbuild run --mount=from=${BASE} true`], /^line 2: ONBUILD RUN --mount=from=/],
      [[`FROM ${BASE}`, 'ONBUILD ADD https://x/y /z'], /^line 2: ADD https:\/\/x\/y/],
      [[`FROM ${BASE}`, 'ONBUILD FROM x'], /^line 2: ONBUILD FROM/],
      [['RUN true', `FROM ${BASE}`], /^line 1: RUN: a Dockerfile starts with FROM/],
      [['# only a comment'], /no FROM/],
      [[`FROM ${BASE}`, 'COPY --from= /a /b'], /^line 2: COPY --from: names nothing/],
    ];
    for (const [lines, message] of cases) expect(refused(lines), lines.join(' | ')).toMatch(message);
  });

  it('leaves a here-string (<<<) and shell redirections alone', () => {
    expect(read([`FROM ${BASE}`, 'RUN cat <<<"x" > /f && echo a<<b', 'ADD local.tar /opt/']).map((i) => i.image)).toEqual([BASE]);
  });

  it("checks a base image's ONBUILD triggers as its own ONBUILD lines", () => {
    expect(triggerProblem('RUN echo fine')).toBeUndefined();
    expect(triggerProblem(`COPY --from=${REGISTRY} /a /b`)).toMatch(/^ONBUILD COPY --from/);
    expect(triggerProblem('ADD http://127.0.0.1:5999/f /f')).toMatch(/^ADD http/);
  });
});

describe('labelStages', () => {
  it('puts the labels after each FROM, continuations and the escape directive kept', () => {
    const text = ['# escape=`', 'FROM a `', '  AS one', 'RUN x', 'from b', ''].join('\n');
    expect(labelStages(text, { 'sandboxd.build': 'id1' })).toBe(['# escape=`', 'FROM a `', '  AS one', 'LABEL sandboxd.build="id1"', 'RUN x', 'from b', 'LABEL sandboxd.build="id1"', ''].join('\n'));
  });
});
