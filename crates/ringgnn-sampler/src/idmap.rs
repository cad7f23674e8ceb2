//! [`IdMap`]: a batch's dedup map, global node id to local id.
//!
//! Relabelling looks every drawn neighbor up in it (hundreds of thousands per batch), at
//! random, in a table of megabytes: the time goes to cache misses. A general hash map touches
//! two places per lookup (a control byte, then the slot) and pads a `(u64, u32)` entry to 16
//! bytes. This table touches one: open addressing with linear probing, the key and the value
//! in one slot, 8 bytes when node ids fit 32 bits (12 when not). Its size is not a power of two (a slot is
//! found by multiplying the hash by the size, Lemire's range reduction), so a table sized for
//! what a batch will hold is not rounded up to double that.

use ringgnn_store::rng::mix64;

/// Most entries per slot, as a fraction (`LOAD.0 / LOAD.1`): linear probing stays short below
/// it.
const LOAD: (usize, usize) = (7, 10);

/// Smallest table.
const MIN_SLOTS: usize = 16;

/// Slots for `n` entries.
fn slots_for(n: usize) -> usize {
    n.saturating_mul(LOAD.1) / LOAD.0 + 1
}

/// One slot of a [`Table`]: empty, or a key (a node id) and its value (a local id).
pub(crate) trait Slot: Copy {
    const EMPTY: Self;
    fn new(key: u64, val: u32) -> Self;
    fn is_empty(self) -> bool;
    fn key(self) -> u64;
    fn val(self) -> u32;
}

/// Key and value packed in 8 bytes, for graphs whose node ids are below `u32::MAX` (so that
/// no entry is all ones, the empty slot).
#[derive(Clone, Copy)]
pub(crate) struct Narrow(u64);

impl Slot for Narrow {
    const EMPTY: Self = Narrow(u64::MAX);
    #[inline(always)]
    fn new(key: u64, val: u32) -> Self {
        debug_assert!(key < u32::MAX as u64);
        Narrow(key << 32 | val as u64)
    }
    #[inline(always)]
    fn is_empty(self) -> bool {
        self.0 == u64::MAX
    }
    #[inline(always)]
    fn key(self) -> u64 {
        self.0 >> 32
    }
    #[inline(always)]
    fn val(self) -> u32 {
        self.0 as u32
    }
}

/// Any node id (`u64::MAX` is none: ids are below the node count), 12 bytes: packed, so that
/// the key's alignment pads no slot to 16 (a batch at seed times keys its nodes by group and
/// id, which needs the wide table on any graph of more than a few million nodes).
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
pub(crate) struct Wide(u64, u32);

impl Slot for Wide {
    const EMPTY: Self = Wide(u64::MAX, 0);
    #[inline(always)]
    fn new(key: u64, val: u32) -> Self {
        Wide(key, val)
    }
    #[inline(always)]
    fn is_empty(self) -> bool {
        self.key() == u64::MAX
    }
    #[inline(always)]
    fn key(self) -> u64 {
        self.0
    }
    #[inline(always)]
    fn val(self) -> u32 {
        self.1
    }
}

/// The table: the first `size` slots of `slots` are in use (the allocation is kept when a
/// batch needs fewer, so that clearing costs what the batch needs).
pub(crate) struct Table<S> {
    slots: Vec<S>,
    size: usize,
    len: usize,
}

impl<S: Slot> Table<S> {
    fn new() -> Self {
        Table {
            slots: vec![S::EMPTY; MIN_SLOTS],
            size: MIN_SLOTS,
            len: 0,
        }
    }

    /// Empty, with `size` slots in use.
    fn reset(&mut self, size: usize) {
        let size = size.max(MIN_SLOTS);
        if self.slots.len() < size {
            self.slots.reserve_exact(size - self.slots.len());
            self.slots.resize(size, S::EMPTY);
        }
        self.slots[..size].fill(S::EMPTY);
        self.size = size;
        self.len = 0;
    }

    /// The slot holding `key` (`Ok`), or the empty one where it would go (`Err`): linear
    /// probing from where the key's hash lands.
    #[inline(always)]
    fn find(&self, key: u64) -> std::result::Result<usize, usize> {
        let mut i = ((mix64(key) as u128 * self.size as u128) >> 64) as usize;
        loop {
            let s = self.slots[i];
            if s.is_empty() {
                return Err(i);
            }
            if s.key() == key {
                return Ok(i);
            }
            i += 1;
            if i == self.size {
                i = 0;
            }
        }
    }

    /// Twice the slots, the entries placed again.
    #[cold]
    fn grow(&mut self) {
        let old: Vec<S> = self.slots[..self.size]
            .iter()
            .copied()
            .filter(|s| !s.is_empty())
            .collect();
        self.reset(self.size * 2);
        self.len = old.len();
        for s in old {
            let (Ok(i) | Err(i)) = self.find(s.key());
            self.slots[i] = s;
        }
    }

    fn bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<S>()) as u64
    }
}

/// The table of an [`IdMap`], whichever width; see [`with_table!`].
pub(crate) enum Tables {
    Narrow(Table<Narrow>),
    Wide(Table<Wide>),
}

/// A table that maps node ids to local ids.
pub(crate) trait Lookup {
    /// The value of `key`, inserting `make()` when it has none (an error from `make` leaves
    /// the table as it was).
    fn get_or_insert<E>(
        &mut self,
        key: u64,
        make: impl FnOnce() -> Result<u32, E>,
    ) -> Result<u32, E>;
}

impl<S: Slot> Lookup for Table<S> {
    #[inline(always)]
    fn get_or_insert<E>(
        &mut self,
        key: u64,
        make: impl FnOnce() -> Result<u32, E>,
    ) -> Result<u32, E> {
        if (self.len + 1) * LOAD.1 > self.size * LOAD.0 {
            self.grow();
        }
        match self.find(key) {
            Ok(i) => Ok(self.slots[i].val()),
            Err(i) => {
                let val = make()?;
                self.slots[i] = S::new(key, val);
                self.len += 1;
                Ok(val)
            }
        }
    }
}

/// Evaluate `$body` with `$t` bound to the table of the [`IdMap`] `$map`, compiled once per
/// width: one branch per call, none per lookup.
macro_rules! with_table {
    ($map:expr, $t:ident => $body:expr) => {
        match &mut $map.0 {
            $crate::idmap::Tables::Narrow($t) => $body,
            $crate::idmap::Tables::Wide($t) => $body,
        }
    };
}
pub(crate) use with_table;

/// A batch's dedup map: global node id to local id (see the module docs).
pub(crate) struct IdMap(pub(crate) Tables);

impl IdMap {
    /// A map for the node ids of a graph of `num_nodes` nodes.
    pub(crate) fn for_nodes(num_nodes: u64) -> Self {
        IdMap(if num_nodes < u32::MAX as u64 {
            Tables::Narrow(Table::new())
        } else {
            Tables::Wide(Table::new())
        })
    }

    /// Wide enough for keys below `keys` (a narrow table becomes an empty wide one when they
    /// do not fit 32 bits; a wide one stays).
    pub(crate) fn widen_for(&mut self, keys: u64) {
        if keys >= u32::MAX as u64 && matches!(self.0, Tables::Narrow(_)) {
            *self = IdMap::for_nodes(keys);
        }
    }

    /// Empty, keeping its size.
    pub(crate) fn clear(&mut self) {
        with_table!(self, t => t.reset(t.size))
    }

    /// Empty, sized for `n` entries.
    pub(crate) fn clear_for(&mut self, n: usize) {
        let size = slots_for(n);
        with_table!(self, t => t.reset(size))
    }

    /// Bytes its table takes once [`Self::clear_for`] `n` entries (when it has no more).
    pub(crate) fn bytes_for(&self, n: usize) -> u64 {
        let size = slots_for(n).max(MIN_SLOTS) as u64;
        let slot = match &self.0 {
            Tables::Narrow(_) => std::mem::size_of::<Narrow>(),
            Tables::Wide(_) => std::mem::size_of::<Wide>(),
        } as u64;
        self.bytes().max(size * slot)
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&mut self) -> usize {
        with_table!(self, t => t.len)
    }

    /// Bytes of its table (allocated).
    pub(crate) fn bytes(&self) -> u64 {
        match &self.0 {
            Tables::Narrow(t) => t.bytes(),
            Tables::Wide(t) => t.bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn check(map: &mut IdMap, keys: &[u64]) {
        let mut want: HashMap<u64, u32> = HashMap::new();
        for &k in keys {
            let next = want.len() as u32;
            let w = *want.entry(k).or_insert(next);
            let got = with_table!(map, t => t.get_or_insert::<()>(k, || Ok(next))).unwrap();
            assert_eq!(got, w, "key {k}");
        }
        assert_eq!(map.len(), want.len());
    }

    proptest! {
        /// Both widths number keys as a hash map does, through growth, clearing and resizing;
        /// a failed insert changes nothing.
        #[test]
        fn ids_are_those_of_a_hash_map(
            rounds in prop::collection::vec(
                (prop::collection::vec(0u64..500, 0..300), 0usize..400, any::<bool>()), 1..5),
            wide: bool,
        ) {
            let mut map = IdMap::for_nodes(if wide { u64::MAX } else { 1000 });
            for (keys, size, sized) in rounds {
                if sized { map.clear_for(size) } else { map.clear() }
                check(&mut map, &keys);
                let before = map.len();
                let r = with_table!(map, t => t.get_or_insert(10_000, || Err("no")));
                prop_assert_eq!(r, Err("no"));
                prop_assert_eq!(map.len(), before);
            }
        }
    }

    #[test]
    fn large_ids_use_the_wide_table_and_sizes_are_not_rounded_up() {
        let mut map = IdMap::for_nodes(1 << 40);
        assert!(matches!(map.0, Tables::Wide(_)));
        check(&mut map, &[1 << 39, 0, 1 << 39, (1 << 40) - 1]);
        let mut map = IdMap::for_nodes(u32::MAX as u64 - 1);
        assert!(matches!(map.0, Tables::Narrow(_)));
        check(&mut map, &[u32::MAX as u64 - 2, 0, 7, 0]);
        // Room for 700 entries: 1001 slots of 8 bytes, not 2048.
        map.clear_for(700);
        assert_eq!(map.bytes(), 1001 * 8);
        check(&mut map, &(0..700).collect::<Vec<_>>());
        assert_eq!(map.bytes(), 1001 * 8, "no growth within the size asked");
    }
}
