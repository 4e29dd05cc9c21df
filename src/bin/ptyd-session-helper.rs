//! The per-session helper executable: see `ptyd::process::helper`.

fn main() {
    ptyd::process::helper::helper_executable_main()
}
