// Jump to source inside VS Code's integrated TensorBoard (microsoft/vscode-tensorboard,
// src/session.ts). Its webview frames TensorBoard and listens for `{filename, line}` posted
// from TensorBoard's origin; it drops a message whose `line` is falsy (`!event.data.line`),
// opens `filename` if `fs.existsSync` finds it (else asks the user to pick a file), and
// selects `new Position(line, 0)`: the line is 0-based. The plugin page is reached through
// TensorBoard's frames, so the message goes to window.parent.parent and every ancestor above
// it (only VS Code listens).

/** True when an ancestor frame has another origin (VS Code's webview), or `?vscode=1`. */
export function embeddedInForeignFrame(win: Window = window): boolean {
  try {
    if (new URLSearchParams(win.location.search).get('vscode') === '1') return true;
  } catch {
    // ignore
  }
  let current: Window = win;
  for (let hops = 0; hops < 16 && current !== current.parent; hops += 1) {
    try {
      // Reading a property of another origin's document throws.
      void current.parent.document.body;
    } catch {
      return true;
    }
    current = current.parent;
  }
  return false;
}

/** The windows that get the message: window.parent.parent and its ancestors, each once. */
export function sourceMessageTargets(win: Window = window): Window[] {
  const targets: Window[] = [];
  let current: Window = win.parent.parent;
  for (let hops = 0; hops < 16; hops += 1) {
    if (current !== win && current !== win.parent && !targets.includes(current)) targets.push(current);
    if (current === current.parent) break;
    current = current.parent;
  }
  return targets;
}

/**
 * The `line` VS Code is sent for a frame's 1-based `line`: 0-based, as its Position is. Line 1
 * (0-based 0) would be dropped as falsy, so it is sent as 1: the file opens at its top with
 * line 2 selected, the nearest VS Code can be asked for.
 */
export function vscodeLine(line: number): number {
  return Math.max(1, Math.floor(line) - 1);
}

/** Ask VS Code to open `file` (an absolute path where the server found one) at 1-based `line`. */
export function openSource(file: string, line: number, win: Window = window): void {
  const message = { filename: file, line: vscodeLine(line) };
  for (const target of sourceMessageTargets(win)) target.postMessage(message, '*');
}
