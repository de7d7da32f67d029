import { describe, expect, it } from 'vitest';
import { vscodeLine } from './embed';

// VS Code's TensorBoard (microsoft/vscode-tensorboard src/session.ts) drops a message whose
// line is falsy and selects `new Position(line, 0)`, a 0-based line.
describe('vscodeLine', () => {
  it('sends the 0-based line VS Code selects', () => {
    expect(vscodeLine(2)).toBe(1);
    expect(vscodeLine(42)).toBe(41);
  });

  it('never sends 0, which VS Code drops: line 1 opens the file at its top', () => {
    expect(vscodeLine(1)).toBe(1);
    expect(vscodeLine(0)).toBe(1);
  });
});
