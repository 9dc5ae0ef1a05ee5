/**
 * Screenshots in tool results. A tool declared with `image: true` returns its PNG, base64,
 * in `image_png`. The step log keeps a short note in its place (a screenshot every round
 * would grow the database by megabytes per run); the planner gets the image itself.
 */
import { createHash } from 'node:crypto';

export function splitImage(result: unknown): { kept: unknown; imagePng?: string } {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return { kept: result };
  const { image_png: png, ...rest } = result as Record<string, unknown>;
  if (typeof png !== 'string') return { kept: result };
  const bytes = Buffer.byteLength(png, 'base64');
  const sha = createHash('sha256').update(png).digest('hex').slice(0, 16);
  return { kept: { ...rest, image_png: `(PNG of ${bytes} bytes kept out of the log; sha256 of base64 ${sha})` }, imagePng: png };
}
