// One call-stack frame. With a file and line, inside VS Code (a foreign frame above us) it is
// a link that asks VS Code to open the file at that line; elsewhere it is copyable text. The
// server's absolute path (`path`) is sent where it found the file: the trace's own path is
// usually relative (torch/nn/modules/module.py), which VS Code cannot open without asking.

import type { StackFrame } from '../api/types';
import { embeddedInForeignFrame, openSource } from '../base/embed';

let embedded: boolean | null = null;
const inVsCode = () => (embedded ??= embeddedInForeignFrame());

export function SourceFrame({ frame }: { frame: StackFrame }) {
  const linkable = frame.file !== null && frame.file !== '' && frame.line !== null && frame.line !== undefined;
  if (linkable && inVsCode()) {
    const file = frame.path || (frame.file as string);
    return (
      <a
        href="#"
        class="frame source-link"
        title={`Open ${file}:${frame.line} in VS Code`}
        data-file={file}
        data-line={String(frame.line)}
        onClick={(event) => {
          event.preventDefault();
          openSource(file, frame.line as number);
        }}
      >
        {frame.text}
      </a>
    );
  }
  return (
    <code class={linkable ? 'frame source-text' : 'frame'} title={linkable ? `${frame.path || frame.file}:${frame.line}` : undefined}>
      {frame.text}
    </code>
  );
}
