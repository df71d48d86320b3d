// Two DLLs that wine 8 lacks and a Windows 10 host has, for running the Windows build under wine
// only (`npm run test:platforms`; never shipped). Compiled twice by .ci/platforms.js:
// - bcryptprimitives.dll: Rust's standard library seeds its hash maps from ProcessPrng;
//   this one calls RtlGenRandom (advapi32's SystemFunction036), which wine has.
// - qcsshm-win-core-realtime-l1-1-1.dll (the copy of the binary tested under wine imports it in
//   place of api-ms-win-core-realtime-l1-1-1.dll, which wine routes to its kernelbase): the two clocks systemClock() and hostElapsedRealtime()
//   read on Windows. Wine 8 has only the imprecise QueryUnbiasedInterruptTime (in 100 ns units,
//   from the Linux monotonic clock), so both answer with it: under wine the two readers are the
//   same clock. The real ones are read on the release workflow's Windows runner.
#include <windows.h>

#ifdef SHIM_BCRYPTPRIMITIVES
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
    if (!SystemFunction036(data, chunk)) return FALSE;
    data += chunk;
    length -= chunk;
  }
  return TRUE;
}
#endif

#ifdef SHIM_REALTIME
__declspec(dllexport) void WINAPI QueryUnbiasedInterruptTimePrecise(PULONGLONG time) {
  QueryUnbiasedInterruptTime(time);
}

__declspec(dllexport) void WINAPI QueryInterruptTimePrecise(PULONGLONG time) {
  QueryUnbiasedInterruptTime(time);
}
#endif
