pub const PTX: &str = include_str!(env!("CLUDA_PTX_PATH"));
