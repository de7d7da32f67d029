import type { ViewProps } from '../../api/types';
import { Empty } from '../../components/Status';

export function DiffView(_props: ViewProps) {
  return <Empty>Diff view: coming next.</Empty>;
}
