// The call stacks of one operator (and input shape), frames innermost first.

import type { OperatorStacksReply } from '../../api/types';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber } from '../../base/format';
import { SourceFrame } from '../../components/SourceFrame';
import { Empty, Loaded } from '../../components/Status';

export function Stacks(props: { run: string; worker: string; span: number; name: string; inputShape: string | null }) {
  const state = useApi<'operator_stacks', OperatorStacksReply>('operator_stacks', {
    run: props.run,
    worker: props.worker,
    span: props.span,
    name: props.name,
    input_shape: props.inputShape,
  });
  return (
    <Loaded state={state} label="Loading call stacks…">
      {(data) =>
        data.stacks.length === 0 ? (
          <Empty>No call stack was recorded for this operator.</Empty>
        ) : (
          <div class="stacks" data-testid="stacks">
            {data.stacks.map((stack, i) => (
              <div key={i} class="call-stack">
                <div class="stack-head">
                  {formatNumber(stack.calls)} call{stack.calls === 1 ? '' : 's'} · host self {formatDuration(stack.host_self_us)} · host total{' '}
                  {formatDuration(stack.host_total_us)} · device self {formatDuration(stack.device_self_us)}
                </div>
                <ol class="frames">
                  {stack.frames.map((frame, j) => (
                    <li key={j}>
                      <SourceFrame frame={frame} />
                    </li>
                  ))}
                </ol>
              </div>
            ))}
          </div>
        )
      }
    </Loaded>
  );
}
