// Kernel names as a reader tells them apart. A CUDA kernel's name is its demangled C++
// signature: hundreds of characters of namespaces, lambda chains and parameter lists, in
// which the part that differs between two kernels (the functor, the lambda's signature,
// the template arguments) sits far from the start. Cutting the start off hides exactly
// that part (seven identical "void at::native::vectorized_elementwise..." rows), so the
// short form drops what every such name shares instead, the way Nsight Systems' "base
// name" view and Perfetto's slice names do: no return type, no parameter list, no
// namespace qualifiers, a lambda named by the function it is in and its own signature.
// The full name stays one click away (components/KernelName.tsx).

/** The index of the `(` opening the parameter list that ends `name` (a trailing `(...)`
 *  at template depth 0), or -1 when the name does not end with one. */
function trailingParameters(name: string): number {
  if (!name.endsWith(')')) return -1;
  let depth = 0;
  for (let i = name.length - 1; i >= 0; i -= 1) {
    const c = name[i];
    if (c === ')' || c === '>') depth += 1;
    else if (c === '(' || c === '<') {
      depth -= 1;
      if (depth === 0) return c === '(' && i > 0 ? i : -1;
    }
  }
  return -1;
}

/** `text` without the parameter lists that come before a lambda (`kernel(at::TensorIteratorBase&,
 *  ...)::{lambda...`), which may hold parentheses themselves. */
function dropParametersBeforeLambdas(text: string): string {
  let out = text;
  for (let end = out.indexOf(')::{lambda'); end >= 0; end = out.indexOf(')::{lambda')) {
    let depth = 0;
    let start = end;
    for (; start >= 0; start -= 1) {
      if (out[start] === ')') depth += 1;
      else if (out[start] === '(' && --depth === 0) break;
    }
    if (start < 0) break;
    out = out.slice(0, start) + out.slice(end + 1);
  }
  return out;
}

function replaceUntilStable(text: string, pattern: RegExp, replacement: string): string {
  let before = '';
  let after = text;
  while (before !== after) {
    before = after;
    after = after.replace(pattern, replacement);
  }
  return after;
}

/** The short form of a kernel name (with its parameter list, namespaces dropped, when
 *  `withParameters`: what tells overloads apart): `void at::native::vectorized_elementwise_kernel<4,
 *  at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, ...)` reads
 *  `vectorized_elementwise_kernel<4, FillFunctor<float>, array<char*, 1ul>>`; a lambda
 *  inside `lerp_scalar_kernel(...)::{lambda()#2}::operator()() const::{lambda(float, float)#1}`
 *  reads `lerp_scalar_kernel λ(float, float)`. Names without C++ structure (Triton's,
 *  cuBLAS's) are returned as they are. */
export function shortKernelName(name: string, withParameters = false): string {
  let text = name.trim().replace(/^void\s+/, '');
  const params = trailingParameters(text);
  if (params > 0 && !withParameters) text = text.slice(0, params);
  // `::operator()(args) const` between the links of a lambda chain says nothing
  text = text.replace(/::operator\(\)\([^()]*\)( const)?/g, '');
  // a function's parameter list before its lambdas: `kernel(at::TensorIteratorBase&)::{lambda...`
  text = dropParametersBeforeLambdas(text);
  // a chain of lambdas: the innermost one's signature is the one that differs
  text = text.replace(/(?:::\{lambda\([^()]*\)#\d+\})*::\{lambda\(([^()]*)\)#\d+\}/g, ' λ($1)');
  text = replaceUntilStable(text, /(?:[A-Za-z_]\w*|\(anonymous namespace\))::/g, '');
  return replaceUntilStable(text, /> >/g, '>>').trim() || name;
}

/** The short form of each of `names` that tells it apart from the others: overloads that
 *  differ only in their parameters (cuDNN's two `bn_bw_1C11_singleread<float, 512, ...>`)
 *  keep their parameter lists. */
export function shortKernelNames(names: Iterable<string>): Map<string, string> {
  const unique = [...new Set(names)];
  const short = new Map(unique.map((name) => [name, shortKernelName(name)]));
  const uses = new Map<string, number>();
  for (const s of short.values()) uses.set(s, (uses.get(s) ?? 0) + 1);
  for (const name of unique) if ((uses.get(short.get(name)!) ?? 0) > 1) short.set(name, shortKernelName(name, true));
  return short;
}

/** The kernels of a ` | `-separated sequence (as /kernel_sequences names it). */
export function sequenceKernels(sequence: string): string[] {
  return sequence.split(' | ');
}

/** `text` cut at each occurrence of one of `names` (longest first where they overlap): the
 *  parts in order, each a string or {name} for a quoted name, so a page can show the names
 *  in their short form inside a server's sentence. */
export function splitByNames(text: string, names: readonly string[]): (string | { name: string })[] {
  const sorted = [...new Set(names)].filter(Boolean).sort((a, b) => b.length - a.length);
  const parts: (string | { name: string })[] = [];
  let rest = text;
  for (;;) {
    let at = -1;
    let found = '';
    for (const name of sorted) {
      const i = rest.indexOf(name);
      if (i >= 0 && (at < 0 || i < at)) {
        at = i;
        found = name;
      }
    }
    if (at < 0) break;
    if (at > 0) parts.push(rest.slice(0, at));
    parts.push({ name: found });
    rest = rest.slice(at + found.length);
  }
  if (rest) parts.push(rest);
  return parts;
}
