//! Compiles `proto/ptyd/v1/ptyd.proto` with a vendored `protoc` and emits a descriptor set for
//! server reflection.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC from the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("ptyd_descriptor.bin"))
        .compile_protos(&["proto/ptyd/v1/ptyd.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
