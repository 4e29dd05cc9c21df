//! The per-session helper executable, which `ptyd serve` finds beside itself and starts for
//! each terminal session: see `ptyd::process::helper`.

fn main() {
    ptyd::process::helper::main()
}
