import type { ViewProps } from '../../api/types';
import { Empty } from '../../components/Status';

export function DistributedView(_props: ViewProps) {
  return <Empty>Distributed view: coming next.</Empty>;
}
