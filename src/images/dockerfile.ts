/**
 * The images a Dockerfile builds from: each `FROM` that names neither `scratch` nor an earlier
 * stage (`FROM x AS name`), in order, without repeats. Line continuations are joined and
 * comments skipped; a reference holding a build argument (`$VAR`) is returned as written.
 */
export function baseImages(dockerfile: string): string[] {
  const stages = new Set<string>();
  const images: string[] = [];
  const lines = dockerfile.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  for (const line of lines) {
    const words = line.trim().split(/\s+/);
    if (words[0]?.toUpperCase() !== 'FROM') continue;
    const args = words.slice(1).filter((word) => !word.startsWith('--'));
    const [image, as, stage] = args;
    if (!image) continue;
    const local = image.toLowerCase() === 'scratch' || stages.has(image.toLowerCase());
    if (!local && !images.includes(image)) images.push(image);
    if (as?.toUpperCase() === 'AS' && stage) stages.add(stage.toLowerCase());
  }
  return images;
}
