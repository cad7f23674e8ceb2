//! [`IdMap`]: a batch's dedup map, global node id to local id.
//!
//! Relabelling looks every drawn neighbor up in it (hundreds of thousands per batch), at
//! random, in a table of megabytes: the time goes to cache misses. A general hash map touches
//! two places per lookup (a control byte, then the slot) and pads a `(u64, u32)` entry to 16
//! bytes. This table touches one: open addressing with linear probing, the key and the value
//! in one slot, 8 bytes when node ids fit 32 bits (12 when not). Its size is not a power of two (a slot is
//! found by multiplying the hash by the size, Lemire's range reduction), so a table sized for
//! what a batch will hold is not rounded up to double that.
//!
//! A batch at seed times keys a node by its group and id ([`GroupKeys`]), and nodes of two
//! groups are never the same node: its map holds one small table per group ([`Grouped`]). A
//! hop relabels the draws of a group's frontier nodes together (they are next to each other in
//! the frontier), so those lookups stay in that group's few kilobytes, where one table of every
//! group's nodes would miss the cache at nearly every lookup.

use ringgnn_store::rng::mix64;

/// Most entries per slot, as a fraction (`LOAD.0 / LOAD.1`): linear probing stays short below
/// it.
const LOAD: (usize, usize) = (7, 10);

/// Smallest table.
const MIN_SLOTS: usize = 16;

/// Slots a group's table may keep from batch to batch, however few it held ([`Table::restart`]).
const GROUP_SLOTS: usize = 64;

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

    /// Empty and small again, its allocation at most twice what it held or [`GROUP_SLOTS`]: a
    /// group's table grows with its group ([`IdMap::reserve_in_groups`]), and one kept at the
    /// size of the largest group its index ever had would spread a small group's lookups over
    /// cold memory (and hold it), where one of about the last group's size is reused without
    /// allocating.
    fn restart(&mut self) {
        let keep = (2 * slots_for(self.len)).max(GROUP_SLOTS);
        if self.slots.len() > keep {
            self.slots.truncate(keep);
            self.slots.shrink_to(keep);
        }
        self.reset(MIN_SLOTS);
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

    /// Room for `n` entries without growing, the entries placed again through `scratch` where
    /// it has fewer slots (in its allocation, when that is large enough).
    fn reserve(&mut self, n: usize, scratch: &mut Vec<S>) {
        let size = slots_for(n);
        if size <= self.size {
            return;
        }
        scratch.clear();
        scratch.extend(self.slots[..self.size].iter().filter(|s| !s.is_empty()));
        self.reset(size);
        self.len = scratch.len();
        for &s in scratch.iter() {
            let (Ok(i) | Err(i)) = self.find(s.key());
            self.slots[i] = s;
        }
    }

    /// Twice the slots, the entries placed again (in a new allocation, the old one read and
    /// dropped).
    #[cold]
    fn grow(&mut self) {
        let size = self.size;
        let old = std::mem::replace(&mut self.slots, vec![S::EMPTY; 2 * size]);
        self.size = 2 * size;
        for &s in old[..size].iter().filter(|s| !s.is_empty()) {
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
    Grouped(Grouped),
}

/// How a batch at seed times keys a node `v` of a type of `n` nodes reached in group `g`:
/// `g << bits | v`, with `bits` the bits of the type's largest id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupKeys {
    /// The batch's groups.
    pub groups: u64,
    /// The type's node count.
    pub n: u64,
}

impl GroupKeys {
    /// The bits of an id below `n`.
    #[inline(always)]
    fn bits(n: u64) -> u32 {
        64 - n.saturating_sub(1).leading_zeros()
    }

    /// The key of node `v` (below `n`) in group `g`.
    #[inline(always)]
    pub fn key(g: u64, n: u64, v: u64) -> u64 {
        g.checked_shl(Self::bits(n)).unwrap_or(0) | v
    }

    /// The group and the node of a key of a type of `n` nodes.
    #[inline(always)]
    pub fn split(key: u64, n: u64) -> (u64, u64) {
        Self::split_at(key, Self::bits(n))
    }

    /// [`Self::split`] with the bits of the type's ids known.
    #[inline(always)]
    fn split_at(key: u64, bits: u32) -> (u64, u64) {
        let g = key.checked_shr(bits).unwrap_or(0);
        (g, key ^ g.checked_shl(bits).unwrap_or(0))
    }

    /// Whether the keys fit 64 bits, below `u64::MAX` (a wide table's empty slot): with one
    /// group the keys are the ids.
    pub fn fit(self) -> bool {
        self.groups <= 1 || (self.groups as u128) << Self::bits(self.n) <= u64::MAX as u128
    }
}

/// One narrow table per group of keys (see the module docs): key `g << bits | v` is `v` in
/// table `g`.
pub(crate) struct Grouped {
    bits: u32,
    tables: Vec<Table<Narrow>>,
    /// Keys to come per table, and the entries of a table being resized
    /// ([`IdMap::reserve_in_groups`]).
    counts: Vec<usize>,
    scratch: Vec<Narrow>,
}

impl Lookup for Grouped {
    #[inline(always)]
    fn get_or_insert<E>(
        &mut self,
        key: u64,
        make: impl FnOnce() -> Result<u32, E>,
    ) -> Result<u32, E> {
        let (g, v) = GroupKeys::split_at(key, self.bits);
        self.tables[g as usize].get_or_insert(v, make)
    }

    #[inline(always)]
    fn prepare_group(&mut self, g: u64) {
        let Some(c) = self.counts.get_mut(g as usize).map(std::mem::take) else {
            return;
        };
        if c > 0 {
            let t = &mut self.tables[g as usize];
            t.reserve(t.len + c, &mut self.scratch);
        }
    }
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

    /// Just before the keys of group `g` come: room for those counted
    /// ([`IdMap::count_in_groups`], once; a table made ready just before its lookups is still in
    /// cache for them, where all made ready first would be evicted by the last ones). Nothing
    /// for one table.
    #[inline(always)]
    fn prepare_group(&mut self, _g: u64) {}
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
            $crate::idmap::Tables::Grouped($t) => $body,
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

    /// Able to hold the keys of a batch at seed times (`keys.fit()`), emptied when it changes:
    /// with more than one group, one table per group ([`Grouped`], as many as any batch so far
    /// had) where the type's ids fit a narrow table, else a wide table of whole keys; with one
    /// group, as it is (its keys are the ids). A map never narrows again; a later batch without
    /// times keys its nodes by id, in group 0.
    pub(crate) fn widen_for(&mut self, keys: GroupKeys) {
        if keys.groups <= 1 {
            return;
        }
        if keys.n >= u32::MAX as u64 {
            if matches!(self.0, Tables::Narrow(_)) {
                self.0 = Tables::Wide(Table::new());
            }
            return;
        }
        let bits = GroupKeys::bits(keys.n);
        if let Tables::Narrow(_) = self.0 {
            self.0 = Tables::Grouped(Grouped {
                bits,
                tables: Vec::new(),
                counts: Vec::new(),
                scratch: Vec::new(),
            });
        }
        if let Tables::Grouped(g) = &mut self.0 {
            debug_assert_eq!(g.bits, bits, "one type's map, one node count");
            while (g.tables.len() as u64) < keys.groups {
                g.tables.push(Table::new());
            }
        }
    }

    /// With one table per group ([`Grouped`]), count the keys to come, given as the group of
    /// each (a key already there counts too), for [`Lookup::prepare_group`] to make room for
    /// them: each table resized once, where growing as they come would double it several
    /// times. Does nothing with one table.
    pub(crate) fn count_in_groups(&mut self, groups: impl Iterator<Item = u64>) {
        let Tables::Grouped(g) = &mut self.0 else {
            return;
        };
        g.counts.clear();
        g.counts.resize(g.tables.len(), 0);
        groups.for_each(|x| g.counts[x as usize] += 1);
    }

    /// Empty, keeping its size.
    pub(crate) fn clear(&mut self) {
        match &mut self.0 {
            Tables::Narrow(t) => t.reset(t.size),
            Tables::Wide(t) => t.reset(t.size),
            Tables::Grouped(g) => g.tables.iter_mut().for_each(Table::restart),
        }
    }

    /// Empty, sized for `n` entries (grouped: each table keeps its size, the groups' shares of
    /// `n` being unknown).
    pub(crate) fn clear_for(&mut self, n: usize) {
        let size = slots_for(n);
        match &mut self.0 {
            Tables::Narrow(t) => t.reset(size),
            Tables::Wide(t) => t.reset(size),
            Tables::Grouped(_) => self.clear(),
        }
    }

    /// Whether `n` more entries fit without the table growing (grouped: always, each group's
    /// table made ready for its keys as they come, [`Lookup::prepare_group`]).
    pub(crate) fn has_room(&self, n: usize) -> bool {
        let fits =
            |len: usize, size: usize| len.saturating_add(n).saturating_mul(LOAD.1) <= size * LOAD.0;
        match &self.0 {
            Tables::Narrow(t) => fits(t.len, t.size),
            Tables::Wide(t) => fits(t.len, t.size),
            Tables::Grouped(_) => true,
        }
    }

    /// Bytes its table takes once [`Self::clear_for`] `n` entries (when it has no more).
    pub(crate) fn bytes_for(&self, n: usize) -> u64 {
        let size = slots_for(n).max(MIN_SLOTS) as u64;
        let slot = match &self.0 {
            Tables::Narrow(_) | Tables::Grouped(_) => std::mem::size_of::<Narrow>(),
            Tables::Wide(_) => std::mem::size_of::<Wide>(),
        } as u64;
        self.bytes().max(size * slot)
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&mut self) -> usize {
        match &self.0 {
            Tables::Narrow(t) => t.len,
            Tables::Wide(t) => t.len,
            Tables::Grouped(g) => g.tables.iter().map(|t| t.len).sum(),
        }
    }

    /// Bytes of its tables (allocated), with a grouped map's counts and resizing scratch.
    pub(crate) fn bytes(&self) -> u64 {
        match &self.0 {
            Tables::Narrow(t) => t.bytes(),
            Tables::Wide(t) => t.bytes(),
            Tables::Grouped(g) => {
                let side = std::mem::size_of::<usize>() * g.counts.capacity()
                    + std::mem::size_of::<Narrow>() * g.scratch.capacity();
                g.tables.iter().map(Table::bytes).sum::<u64>() + side as u64
            }
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

    proptest! {
        /// A map of a batch at seed times, one table per group, numbers keys as a hash map
        /// does, through clearing and a later batch with more groups; keys split back into
        /// their group and node.
        #[test]
        fn grouped_ids_are_those_of_a_hash_map(
            rounds in prop::collection::vec(
                (1u64..6, prop::collection::vec((0u64..6, 0u64..1000), 0..300)), 1..4),
        ) {
            let n = 1000;
            let mut map = IdMap::for_nodes(n);
            for (groups, keys) in rounds {
                map.clear();
                map.widen_for(GroupKeys { groups: groups + 1, n });
                prop_assert!(groups + 1 == 1 || matches!(map.0, Tables::Grouped(_)));
                let keys: Vec<u64> = keys.iter().map(|&(g, v)| {
                    let k = GroupKeys::key(g % (groups + 1), n, v);
                    assert_eq!(GroupKeys::split(k, n), (g % (groups + 1), v));
                    k
                }).collect();
                check(&mut map, &keys);
            }
        }
    }

    proptest! {
        /// Tables of groups given room for the keys to come number keys as a hash map does
        /// (the room counting keys already there too), and do not grow while those come.
        #[test]
        fn reserved_groups_number_keys_as_a_hash_map_without_growing(
            rounds in prop::collection::vec(prop::collection::vec((0u64..4, 0u64..300), 0..300), 1..4),
        ) {
            let (n, groups) = (1000, 4);
            let mut map = IdMap::for_nodes(n);
            map.widen_for(GroupKeys { groups, n });
            let mut want: HashMap<u64, u32> = HashMap::new();
            for keys in rounds {
                map.count_in_groups(keys.iter().map(|&(g, _)| g));
                (0..groups).for_each(|g| with_table!(map, t => t.prepare_group(g)));
                let Tables::Grouped(g) = &map.0 else { panic!("one table per group") };
                let sizes: Vec<usize> = g.tables.iter().map(|t| t.size).collect();
                for &(g, v) in &keys {
                    let k = GroupKeys::key(g, n, v);
                    let next = want.len() as u32;
                    let w = *want.entry(k).or_insert(next);
                    let got = with_table!(map, t => t.get_or_insert::<()>(k, || Ok(next)));
                    prop_assert_eq!(got, Ok(w));
                }
                let Tables::Grouped(g) = &map.0 else { panic!("one table per group") };
                let after: Vec<usize> = g.tables.iter().map(|t| t.size).collect();
                prop_assert_eq!(after, sizes);
                prop_assert_eq!(map.len(), want.len());
            }
        }
    }

    proptest! {
        /// `has_room(k)` says exactly whether `k` new keys go in without the table growing:
        /// true, they do; false, the `k`-th grows it.
        #[test]
        fn room_is_what_fits_without_growing(
            size in 0usize..300, held in 0usize..300, k in 0usize..300, wide: bool,
        ) {
            let mut map = IdMap::for_nodes(if wide { u64::MAX } else { 1000 });
            map.clear_for(size);
            check(&mut map, &(0..held as u64).collect::<Vec<_>>());
            let slots = |m: &IdMap| match &m.0 {
                Tables::Narrow(t) => t.size,
                Tables::Wide(t) => t.size,
                Tables::Grouped(_) => unreachable!("one table"),
            };
            let (room, before) = (map.has_room(k), slots(&map));
            let mut grew = false;
            for key in held..held + k {
                with_table!(map, t => t.get_or_insert::<()>(key as u64, || Ok(key as u32))).unwrap();
                grew |= slots(&map) != before;
            }
            prop_assert_eq!(room, !grew);
            prop_assert!(map.has_room(0));
        }
    }

    #[test]
    fn group_keys_fit_64_bits_or_are_refused() {
        let fit = |groups, n| GroupKeys { groups, n }.fit();
        // 2^20 nodes: 20 bits of id, so 2^44 groups would reach u64::MAX, one fewer does not.
        let n = 1 << 20;
        assert!(fit((1 << 44) - 1, n) && !fit(1 << 44, n));
        let top = GroupKeys::key((1 << 44) - 2, n, n - 1);
        assert_eq!(top, u64::MAX - (1 << 20));
        assert_eq!(GroupKeys::split(top, n), ((1 << 44) - 2, n - 1));
        // Ids of 63 or 64 bits leave room for one group only.
        assert!(fit(1, u64::MAX) && !fit(2, u64::MAX) && !fit(2, 1 << 63));
        let key = GroupKeys::key(0, u64::MAX, 7);
        assert_eq!(GroupKeys::split(key, u64::MAX), (0, 7));
        // Ids too wide for a narrow table: one wide table of whole keys.
        let mut map = IdMap::for_nodes(1 << 40);
        map.widen_for(GroupKeys {
            groups: 3,
            n: 1 << 40,
        });
        assert!(matches!(map.0, Tables::Wide(_)));
        check(
            &mut map,
            &[
                GroupKeys::key(2, 1 << 40, 5),
                5,
                GroupKeys::key(2, 1 << 40, 5),
            ],
        );
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
