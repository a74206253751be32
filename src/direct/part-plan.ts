// How a direct upload is cut into parts: every part but the last exactly
// `partSize` bytes, the last the rest, within the store's bounds. The URLs
// are signed for these lengths, and complete checks the stored parts
// against them.
import type { DirectStore } from '../storage/direct.js';
import { directErrors } from './errors.js';

const MiB = 1024 * 1024;

/** The part size when the client names none: 16 MiB, or the least whole MiB that keeps the file within the store's parts. */
export const DEFAULT_PART_SIZE = 16 * MiB;

export interface PartPlan {
  size: number;
  partSize: number;
  parts: number;
}

export function planParts(size: number, requested: number | undefined, limits: DirectStore['limits']): PartPlan {
  const { minPartSize, maxPartSize, maxParts } = limits;
  const partSize = requested ?? Math.min(maxPartSize, Math.max(DEFAULT_PART_SIZE, Math.ceil(size / maxParts / MiB) * MiB));
  if (partSize < minPartSize || partSize > maxPartSize) {
    throw directErrors.invalid(`part_size must be from ${minPartSize} to ${maxPartSize} bytes`);
  }
  const parts = Math.ceil(size / partSize);
  if (parts > maxParts) throw directErrors.invalid(`a size of ${size} bytes in parts of ${partSize} makes ${parts} parts, more than the store's ${maxParts}: choose a larger part_size`);
  return { size, partSize, parts };
}

/** The exact length of part `n` (1-based) of `plan`. */
export const partLength = (plan: PartPlan, n: number) => (n < plan.parts ? plan.partSize : plan.size - (plan.parts - 1) * plan.partSize);
