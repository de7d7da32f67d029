// Jump to source inside VS Code's integrated TensorBoard. VS Code's Python extension shows
// TensorBoard in a webview frame and opens `{filename, line}` (line 0-based) posted to it with
// target origin '*'. The plugin page is reached through TensorBoard's frames, so the message
// goes to window.parent.parent and every ancestor above it (only VS Code listens).

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

/** Ask VS Code to open `file` at 1-based `line` (posted 0-based, as VS Code expects). */
export function openSource(file: string, line: number, win: Window = window): void {
  const message = { filename: file, line: Math.max(0, line - 1) };
  for (const target of sourceMessageTargets(win)) target.postMessage(message, '*');
}
