// schema.d.ts is generated (`npm run gen:api`) from ../tb_plugin/openapi.yaml, itself generated
// in part from the Python declarations (tables, routes, tabs): a declaration changed without
// both generators run leaves the page typed against an API that is no longer served.

import { readFileSync } from 'node:fs';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';

const SPEC = new URL('../../../tb_plugin/openapi.yaml', import.meta.url);

describe('generated API types', () => {
  it('are what npm run gen:api writes from openapi.yaml', async () => {
    const fresh = COMMENT_HEADER + astToString(await openapiTS(SPEC));
    expect(readFileSync(new URL('./schema.d.ts', import.meta.url), 'utf8') === fresh, 'run: npm run gen:api').toBe(true);
  }, 30_000);
});
