import { describe, expect, it } from 'vitest';
import { sequenceKernels, shortKernelName, shortKernelNames, splitByNames } from './names';

// Names as the H100 samples' traces write them (samples/gpu_h100_*).
const FILL_FLOAT = 'void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)';
const FILL_BYTE = 'void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>, std::array<char*, 1ul> >(int, at::native::FillFunctor<unsigned char>, std::array<char*, 1ul>)';
const LERP =
  'void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::lerp_scalar_kernel(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float, float)#1}, std::array<char*, 3ul> >(int, at::native::(anonymous namespace)::lerp_scalar_kernel(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float, float)#1}, std::array<char*, 3ul>)';
const COPY_LONG =
  'void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1} const&)::{lambda(int)#1})';
const SUM =
  'void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)';

describe('shortKernelName', () => {
  it('drops the return type, parameter list and namespaces, keeping the template arguments', () => {
    expect(shortKernelName(FILL_FLOAT)).toBe('vectorized_elementwise_kernel<4, FillFunctor<float>, array<char*, 1ul>>');
  });

  it('keeps the part that differs between kernels of one template', () => {
    const names = [FILL_FLOAT, FILL_BYTE, LERP, COPY_LONG, COPY_LONG.replaceAll('{lambda(long)#1}', '{lambda(float)#1}'), SUM];
    const short = names.map((name) => shortKernelName(name));
    expect(new Set(short).size).toBe(names.length);
    short.forEach((s, i) => expect(s.length).toBeLessThan(names[i].length / 2));
  });

  it('names a lambda by its function and its own signature', () => {
    expect(shortKernelName(LERP)).toBe('vectorized_elementwise_kernel<4, lerp_scalar_kernel λ(float, float), array<char*, 3ul>>');
    expect(shortKernelName(SUM)).toBe('reduce_kernel<512, 1, ReduceOp<float, func_wrapper_t<float, sum_functor<float, float, float> λ(float, float)>, unsigned int, float, 4, 4>>');
  });

  it('leaves names without C++ structure as they are', () => {
    for (const name of ['triton_poi_fused_clone_permute_5', 'sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas', 'Memcpy HtoD (Pageable -> Device)']) {
      expect(shortKernelName(name)).toBe(name);
    }
  });

  it('splits a kernel sequence into its kernels', () => {
    expect(sequenceKernels(`${FILL_FLOAT} | triton_poi_fused_clone_permute_5`)).toEqual([FILL_FLOAT, 'triton_poi_fused_clone_permute_5']);
  });
});

describe('shortKernelNames', () => {
  // cuDNN's overloads in the ResNet-50 sample (samples/gpu_resnet50_v100)
  const BN_ARGS = 'void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_bw_1C11_args<float>)';
  const BN_LIST = 'void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(float, float, cudnnTensorStruct, float const*, cudnn::reduced_divisor, int)';

  it('keeps the parameter lists of overloads that would read the same', () => {
    const short = shortKernelNames([BN_ARGS, BN_LIST, FILL_FLOAT, FILL_FLOAT]);
    expect(short.get(BN_ARGS)).toBe('bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(bn_bw_1C11_args<float>)');
    expect(short.get(BN_LIST)).toBe('bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(float, float, cudnnTensorStruct, float const*, reduced_divisor, int)');
    expect(short.get(FILL_FLOAT)).toBe(shortKernelName(FILL_FLOAT));
    expect(short.size).toBe(3);
  });
});

describe('splitByNames', () => {
  it('cuts a sentence at every quoted name, in order', () => {
    const text = `the kernel sequence ${FILL_FLOAT} | ${LERP} | ${FILL_FLOAT} (launched by aten::mul_) repeats`;
    expect(splitByNames(text, [LERP, FILL_FLOAT])).toEqual([
      'the kernel sequence ', { name: FILL_FLOAT }, ' | ', { name: LERP }, ' | ', { name: FILL_FLOAT }, ' (launched by aten::mul_) repeats',
    ]);
  });

  it('leaves a text without the names whole', () => {
    expect(splitByNames('GPU 0 is busy 8% of the time.', [FILL_FLOAT])).toEqual(['GPU 0 is busy 8% of the time.']);
    expect(splitByNames('x', [])).toEqual(['x']);
  });
});
