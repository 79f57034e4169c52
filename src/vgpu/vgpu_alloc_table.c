/* Per-process allocation table: linear probing with backward-shift deletion in one fixed mmap'ed
 * arena, so insert and remove cost O(1) expected regardless of how many allocations are live, never
 * call malloc and never make a system call after vgpu_at_init. */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "vgpu/vgpu_core.h"

#define META_SIZE_BITS 48
#define META_SIZE_MASK ((1ull << META_SIZE_BITS) - 1)

static uint32_t slot_of(const vgpu_alloc_table* t, uint64_t key, int kind) {
  uint64_t h = (key ^ ((uint64_t)kind << 59)) * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & t->mask;
}

static int entry_kind(const vgpu_at_entry* e) {
  return (int)(e->meta >> 56);
}

static void lock(vgpu_alloc_table* t) {
  while (__atomic_exchange_n(&t->lock, 1, __ATOMIC_ACQUIRE)) {
    while (__atomic_load_n(&t->lock, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}
static void unlock(vgpu_alloc_table* t) {
  __atomic_store_n(&t->lock, 0, __ATOMIC_RELEASE);
}

int vgpu_at_init(vgpu_alloc_table* t, unsigned log2_capacity) {
  if (log2_capacity < 4 || log2_capacity > 28) return -1;
  size_t cap = (size_t)1 << log2_capacity;
  void* m = mmap(NULL, cap * sizeof(vgpu_at_entry), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return -1;
  t->e = (vgpu_at_entry*)m;
  t->mask = (uint32_t)(cap - 1);
  t->count = 0;
  t->lock = 0;
  return 0;
}

void vgpu_at_destroy(vgpu_alloc_table* t) {
  if (t->e) munmap(t->e, ((size_t)t->mask + 1) * sizeof(vgpu_at_entry));
  t->e = 0;
}

int vgpu_at_insert(vgpu_alloc_table* t, uint64_t key, int kind, int dev, uint64_t size) {
  if (!t->e || size > META_SIZE_MASK || dev < 0 || dev > 255 || kind <= 0 || kind > 255) return -1;
  uint64_t meta = ((uint64_t)kind << 56) | ((uint64_t)dev << 48) | size;
  lock(t);
  if (t->count >= t->mask - (t->mask >> 3)) {
    unlock(t);
    return -1;
  }
  uint32_t i = slot_of(t, key, kind);
  for (;;) {
    vgpu_at_entry* e = &t->e[i];
    if (e->meta == 0) {
      e->key = key;
      e->meta = meta;
      t->count++;
      break;
    }
    if (e->key == key &&
        entry_kind(e) == kind) { /* the driver reused a handle we missed: replace */
      e->meta = meta;
      break;
    }
    i = (i + 1) & t->mask;
  }
  unlock(t);
  return 0;
}

int vgpu_at_remove(vgpu_alloc_table* t, uint64_t key, int kind, int* dev, uint64_t* size) {
  if (!t->e) return 0;
  lock(t);
  uint32_t i = slot_of(t, key, kind);
  for (;;) {
    vgpu_at_entry* e = &t->e[i];
    if (e->meta == 0) {
      unlock(t);
      return 0;
    }
    if (e->key == key && entry_kind(e) == kind) break;
    i = (i + 1) & t->mask;
  }
  *dev = (int)((t->e[i].meta >> 48) & 0xff);
  *size = t->e[i].meta & META_SIZE_MASK;
  /* Backward-shift deletion: move later members of the cluster into the hole when allowed. */
  uint32_t hole = i;
  uint32_t j = i;
  for (;;) {
    j = (j + 1) & t->mask;
    vgpu_at_entry* e = &t->e[j];
    if (e->meta == 0) break;
    uint32_t home = slot_of(t, e->key, entry_kind(e));
    /* e may move to hole iff home is not cyclically in (hole, j]. */
    int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!in_range) {
      t->e[hole] = *e;
      hole = j;
    }
  }
  t->e[hole].key = 0;
  t->e[hole].meta = 0;
  t->count--;
  unlock(t);
  return 1;
}
