"""`make profile-serve` reads vLLM's torch profiler table into the parts of a decoding step."""

from __future__ import annotations

from tools.profile_serve import by_kind, report, self_times

# The head of a table vLLM 0.32's CPU worker wrote (rank0.profiler_out.txt), two steps, columns narrowed.
TABLE = """\
----------------------------------------  ------------
                                    Name  Self CPU %    Self CPU  CPU total %   CPU total  CPU time avg  # of Calls
----------------------------------------  ------------
                    _C::onednn_scaled_mm    61.90%    30.000ms    62.71%    30.500ms   217.334us     146
         ## Call CompiledFxGraph None ##     9.11%     4.000ms    69.64%    40.000ms    17.620ms       2
         _C::cpu_attention_with_kv_cache     6.70%     3.000ms     6.70%     3.000ms    94.109us      36
    execute_context_0(0)_generation_1(1)     6.61%     2.000ms    93.06%    48.000ms    23.637ms       2
                 _C::fused_gumbel_argmax     2.96%     1.000ms     2.96%     1.000ms   749.360us       2
           _C::dynamic_scaled_int8_quant     0.90%   500.000us     0.90%     0.500ms     3.121us     146
                             aten::slice     0.60%        1.5s     0.90%        1.6s     1.454us   39944
  execute_context_1(124)_generation_0(0)     0.09%     9.000ms     3.17%   205.572ms   205.572ms       1
----------------------------------------  ------------
Self CPU time total: 6.478s
"""


def test_the_profile_table_becomes_milliseconds_per_decoding_step_by_kind():
    times, steps = self_times(TABLE)
    assert steps == 2  # the prefill step is not a decoding step
    kinds = by_kind({name: spent for name, spent in times.items() if "generation_0" not in name})
    assert round(kinds["linear layers (weights x activations)"], 6) == 0.030
    assert round(kinds["attention and KV cache"], 6) == 0.003
    assert round(kinds["sampling"], 6) == 0.001
    assert round(kinds["activation quantization"], 6) == 0.0005
    assert round(kinds["Python around the compiled graph"], 6) == 0.006
    assert round(kinds["other tensor operations"], 6) == 1.5
    shown = report("int8", {"ms_per_token": 25.0, "ttft_ms": 300.0, "tokens": 3}, kinds, steps)
    assert "| linear layers (weights x activations) | 15.00 | 60 % |" in shown
