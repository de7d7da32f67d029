// The selected event's details from /timeline_event: every field of its table row, the
// operator that launched it (a link to the Operator view searching for it, and a button
// selecting it on the timeline), its call stack (jump-to-source links inside VS Code), and its
// flow arrows from /timeline_flows. Server text is rendered as text only.

import type { TimelineEndpoint, TimelineEventReply, TimelineFlowsReply } from '../../api/types';
import type { ApiState } from '../../api/useApi';
import { formatDuration } from '../../base/format';
import { SourceFrame } from '../../components/SourceFrame';
import { Card, Empty, Loaded } from '../../components/Status';
import type { TrackInfo } from './logic';

export interface DetailsProps {
  event: ApiState<TimelineEventReply>;
  flows: ApiState<TimelineFlowsReply>;
  tracks: Map<number, TrackInfo>;
  operatorHref: (name: string) => string;
  onOperatorLink: (name: string) => void;
  onGoTo: (endpoint: TimelineEndpoint) => void;
}

function place(tracks: Map<number, TrackInfo>, e: TimelineEndpoint): string {
  const t = tracks.get(e.track);
  return t ? `${t.process} / ${t.thread}, level ${e.lane}` : `track ${e.track}`;
}

function fieldText(value: unknown): string {
  if (value === null || value === undefined) return '—';
  return typeof value === 'string' ? value : String(value);
}

export function Details(props: DetailsProps) {
  return (
    <Card title="Selected event" class="trace-details">
      <Loaded state={props.event} label="Loading the event…">
        {(d) => (
          <div data-testid="trace-details" data-event={String(d.event)}>
            <div class="trace-event-name" data-field="event-name">{d.name}</div>
            <dl class="kv">
              <dt>Kind</dt>
              <dd>{d.kind}</dd>
              <dt>Start</dt>
              <dd data-field="event-start">{formatDuration(d.ts_us)} from the trace start</dd>
              <dt>Duration</dt>
              <dd data-field="event-duration">{formatDuration(d.dur_us)}</dd>
              <dt>Where</dt>
              <dd data-field="event-where">{place(props.tracks, d)}</dd>
              {d.operator ? (
                <>
                  <dt>Operator</dt>
                  <dd>
                    <a
                      href={props.operatorHref(d.operator.name)}
                      data-link="operator"
                      title="Show this operator in the Operator view"
                      onClick={(e) => {
                        e.preventDefault();
                        props.onOperatorLink(d.operator?.name ?? '');
                      }}
                    >
                      {d.operator.name}
                    </a>
                    {d.operator.event !== d.event && d.operator.event >= 0 ? (
                      <button type="button" class="link-button" data-control="select-operator" onClick={() => props.onGoTo({ event: d.operator?.event ?? 0, track: -1, lane: 0, ts_us: 0, dur_us: 0 })}>
                        select on the timeline
                      </button>
                    ) : null}
                    {d.operator.input_shape && d.operator.input_shape !== '[]' ? <div class="hint">input shapes {d.operator.input_shape}</div> : null}
                  </dd>
                </>
              ) : null}
            </dl>
            <h3>Flows</h3>
            <Loaded state={props.flows} label="Loading flows…">
              {(f) =>
                f.flows.length === 0 ? (
                  <Empty>No flow arrows touch this event.</Empty>
                ) : (
                  <ul class="trace-flows" data-testid="trace-flows">
                    {f.flows.map((flow, i) => {
                      const other = flow.from.event === d.event ? flow.to : flow.from;
                      const dir = flow.from.event === d.event ? 'to' : 'from';
                      return (
                        <li key={i}>
                          {flow.kind === 'launch' ? 'launch' : 'forward → backward'} {dir}{' '}
                          <button type="button" class="link-button" onClick={() => props.onGoTo(other)}>
                            {place(props.tracks, other)} at {formatDuration(other.ts_us)}
                          </button>
                        </li>
                      );
                    })}
                  </ul>
                )
              }
            </Loaded>
            {d.call_stack && d.call_stack.length ? (
              <>
                <h3>Call stack of {d.operator?.name ?? 'the operator'}</h3>
                <ol class="frames" data-testid="trace-stack">
                  {d.call_stack.map((frame, i) => (
                    <li key={i}>
                      <SourceFrame frame={frame} />
                    </li>
                  ))}
                </ol>
              </>
            ) : null}
            <h3>All fields ({d.source} row {d.row})</h3>
            <dl class="kv trace-fields" data-testid="trace-fields">
              {Object.entries(d.fields).map(([key, value]) => [<dt key={`k-${key}`}>{key}</dt>, <dd key={`v-${key}`}>{fieldText(value)}</dd>])}
              <dt>start (absolute, µs)</dt>
              <dd>{String(d.start_us_absolute)}</dd>
            </dl>
          </div>
        )}
      </Loaded>
    </Card>
  );
}
