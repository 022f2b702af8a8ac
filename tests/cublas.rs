#![cfg(feature = "gpu")]
//! cuBLAS loading (CPU-side): the search list covers CUDA 12 and 13, and a failed load names
//! every file it tried. A separate test binary because the override is read once per process.

#[test]
fn override_is_the_only_candidate_and_a_failure_names_it() {
    let bogus = "/nonexistent/cluda-test/libcublas.so.99";
    // SAFETY: this test binary has this one test, so no other thread reads the environment.
    unsafe { std::env::set_var(cluda::matcher::cublas::CUBLAS_ENV, bogus) };
    assert_eq!(
        cluda::matcher::cublas::candidates(),
        vec![std::path::PathBuf::from(bogus)]
    );
    let e = cluda::matcher::cublas::library().expect_err("a missing file cannot load");
    assert!(e.contains(bogus), "{e}");
    assert!(e.contains(cluda::matcher::cublas::CUBLAS_ENV), "{e}");
}
