// "Top N" picker shared by the views that chart their heaviest rows; the choice is kept in
// the page URL (`top`), like the other view options, so a link reopens the same charts.

import { useUrlParam } from './useUrlParam';

const CHOICES = [5, 10, 20, 50];
const DEFAULT = 10;

/** The Top N in the URL (one of the choices; the default otherwise) and its setter. */
export function useTopN(): [number, (n: number) => void] {
  const [text, setText] = useUrlParam('top', String(DEFAULT));
  const n = Number(text);
  return [CHOICES.includes(n) ? n : DEFAULT, (next: number) => setText(String(next))];
}

export function TopNSelect({ value, onChange }: { value: number; onChange: (n: number) => void }) {
  return (
    <label>
      Top
      <select data-control="top-n" value={String(value)} onChange={(e) => onChange(Number((e.target as HTMLSelectElement).value))}>
        {CHOICES.map((n) => (
          <option key={n} value={String(n)}>{n}</option>
        ))}
      </select>
    </label>
  );
}
