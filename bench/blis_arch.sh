# Sourced by the bench scripts that force BLIS's kernel per run
# (step_profile.sh, gemm_kernels_vs_torch.sh): BLIS 0.9.0's configuration
# names, the BLIS_ARCH_TYPE value of each, and which of them this CPU runs.

# blis_arch_number NAME: arch_t of BLIS 0.9.0 (blis.h), the value
# BLIS_ARCH_TYPE takes; Debian 12's BLIS has no zen4 or zen5 configuration
blis_arch_number() {
  case $1 in
    skx) echo 0 ;; knl) echo 1 ;; haswell) echo 3 ;; sandybridge) echo 4 ;;
    zen3) echo 6 ;; zen2) echo 7 ;; zen) echo 8 ;;
    *) echo "$(basename "$0"): unknown BLIS configuration $1 (skx, haswell, zen3, zen2, zen)" >&2
       exit 2 ;;
  esac
}

# blis_kernels NAME...: sets the array kernels to the names this CPU can run
# ("cpuid", cloze's own choice, always), with a note for each left out; an
# unknown name ends the script
blis_kernels() {
  local k flags
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  kernels=()
  for k in "$@"; do
    case $k in
      cpuid) ;;
      skx) [[ $flags == *avx512f* && $flags == *avx512dq* && $flags == *avx512bw* && $flags == *avx512vl* ]] ||
             { echo "note: skx left out: this CPU lacks AVX-512 F/DQ/BW/VL" >&2; continue; } ;;
      *) blis_arch_number "$k" >/dev/null
         [[ $flags == *avx2* && $flags == *fma* ]] || { echo "note: $k left out: no AVX2/FMA" >&2; continue; } ;;
    esac
    kernels+=("$k")
  done
}
