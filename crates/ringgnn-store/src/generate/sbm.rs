pub fn generate_sbm() { todo!() }
