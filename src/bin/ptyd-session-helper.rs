//! The per-session helper executable: see `ptyd::shim`.

fn main() {
    ptyd::shim::helper_executable_main()
}
