pub fn generate_rmat() { todo!() }
