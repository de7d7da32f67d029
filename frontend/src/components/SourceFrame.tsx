// One call-stack frame. With a file and line, inside VS Code (a foreign frame above us) it is
// a link that asks VS Code to open the file at that line; elsewhere it is copyable text.

import type { StackFrame } from '../api/types';
import { embeddedInForeignFrame, openSource } from '../base/embed';

let embedded: boolean | null = null;
const inVsCode = () => (embedded ??= embeddedInForeignFrame());

export function SourceFrame({ frame }: { frame: StackFrame }) {
  const linkable = frame.file !== null && frame.file !== '' && frame.line !== null && frame.line !== undefined;
  if (linkable && inVsCode()) {
    return (
      <a
        href="#"
        class="frame source-link"
        title={`Open ${frame.file}:${frame.line} in VS Code`}
        data-file={frame.file ?? ''}
        data-line={String(frame.line)}
        onClick={(event) => {
          event.preventDefault();
          openSource(frame.file as string, frame.line as number);
        }}
      >
        {frame.text}
      </a>
    );
  }
  return (
    <code class={linkable ? 'frame source-text' : 'frame'} title={linkable ? `${frame.file}:${frame.line}` : undefined}>
      {frame.text}
    </code>
  );
}
