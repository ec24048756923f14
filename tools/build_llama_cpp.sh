#!/usr/bin/env bash
# Build llama.cpp's llama-server and llama-quantize (ENGINE=llama.cpp, make bench-serve's llama.cpp rows) from
# the llama.cpp that the llama-cpp-python sdist on PyPI carries (its wheel ships neither program), plus its
# converter (convert_hf_to_gguf.py with gguf-py), once per machine: a build with the same version and the same
# instruction sets is kept. Usage: build_llama_cpp.sh OUT_DIR VERSION PIP
set -euo pipefail
out=$1 version=$2 pip=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Not GGML_NATIVE: on a CPU that lists AMX, a native build died with SIGILL in ggml's AMX kernels on
# Q8_0 and Q4_K_M. The instruction sets this CPU lists, AMX left out.
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]] && echo ON || echo OFF; }
options=(
  -DGGML_NATIVE=OFF -DGGML_AVX=$(has avx) -DGGML_AVX2=$(has avx2) -DGGML_FMA=$(has fma) -DGGML_F16C=$(has f16c)
  -DGGML_AVX512=$(has avx512f) -DGGML_AVX512_VBMI=$(has avx512vbmi) -DGGML_AVX512_VNNI=$(has avx512_vnni)
  -DGGML_AVX512_BF16=$(has avx512_bf16) -DGGML_AVX_VNNI=$(has avx_vnni)
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
)
# Built once per machine: the same version with the same instruction sets is already there.
stamp="llama-cpp-python $version ${options[*]}"
if [[ -x "$out/bin/llama-server" && "$(cat "$out/build-options" 2>/dev/null)" == "$stamp" ]]; then
  echo "llama.cpp: up to date in $out"
  exit 0
fi

echo "llama.cpp: fetching llama-cpp-python $version (source)"
"$pip" download --quiet --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$version"
tar -xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"

echo "llama.cpp: building llama-server and llama-quantize (${options[*]})"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "${options[@]}" >/dev/null
cmake --build "$work/build" --target llama-server llama-quantize -j "$(nproc)"

rm -rf "$out.partial"
mkdir -p "$out.partial/bin"
cp "$work/build/bin/llama-server" "$work/build/bin/llama-quantize" "$out.partial/bin/"
cp -r "$src/convert_hf_to_gguf.py" "$src/conversion" "$src/gguf-py" "$out.partial/"
echo "$stamp" > "$out.partial/build-options"
rm -rf "$out"
mv "$out.partial" "$out"
echo "llama.cpp: built into $out"
