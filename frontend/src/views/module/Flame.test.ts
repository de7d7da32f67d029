import { describe, expect, it } from 'vitest';
import { flameLabel } from './Flame';

describe('flameLabel', () => {
  it('names a frame with its host total', () => {
    expect(flameLabel({ name: 'Conv2d_0', value: 1500, children: [] })).toBe('Conv2d_0 1.50 ms');
  });
  it('says how many modules the server folded into a frame at the deepest level', () => {
    expect(flameLabel({ name: 'Block_63', value: 40, children: [], folded: 4936 })).toBe('Block_63 40 µs (+4,936 deeper modules, not drawn)');
  });
});
