import { describe, expect, it } from 'vitest';
import { KERNEL_NAME_LIMIT, shownKernelName } from './KernelName';

describe('shownKernelName', () => {
  it('keeps a readable short form whole', () => {
    const name = 'vectorized_elementwise_kernel<4, BinaryFunctor<float, float, float, threshold_kernel_impl<float> λ(float, float)>, Array<char*, 3>>';
    expect(shownKernelName(name)).toBe(name);
  });

  it('cuts a name that does not demangle to its start and end', () => {
    const mangled = `_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolution${'ILi128ELi32EEENS4_52'.repeat(80)}6ParamsE`;
    const shown = shownKernelName(mangled);
    expect(shown.length).toBe(KERNEL_NAME_LIMIT);
    expect(shown.startsWith('_ZN19cutlass_cudnn_train6Kernel')).toBe(true);
    expect(shown.endsWith('6ParamsE')).toBe(true);
    expect(shown).toContain('…');
  });
});
