// "Top N" picker shared by the views that chart their heaviest rows.

const CHOICES = [5, 10, 20, 50];

export function TopNSelect({ value, onChange }: { value: number; onChange: (n: number) => void }) {
  return (
    <label>
      Top
      <select value={String(value)} onChange={(e) => onChange(Number((e.target as HTMLSelectElement).value))}>
        {CHOICES.map((n) => (
          <option key={n} value={String(n)}>{n}</option>
        ))}
      </select>
    </label>
  );
}
