// The virtual module vite.config.ts builds from ../tb_plugin/openapi.yaml (see there).
declare module 'virtual:column-docs' {
  /** Table component name -> column name -> its declared meaning, with the unit. */
  const docs: Record<string, Record<string, string>>;
  export default docs;
}

// js-yaml ships no types; vite.config.ts uses this one function of it.
declare module 'js-yaml' {
  export function load(text: string): unknown;
}
