/* model.h — the model as the image reader (model.c) builds it from the image, for the two files
 * that read it directly: model.c and state.c.  Every other runtime file reads the model through
 * the accessors of internal.h (tsr_model_*), which model.c defines.  Not installed. */
#ifndef TSR_MODEL_H
#define TSR_MODEL_H

#include "internal.h"

typedef struct Buffer {
    char *name, *shape_text;
    uint8_t kind, init, is_virtual, flags; /* flags: TSR_BUFFER_FLAG_* */
    uint8_t dtype;                         /* TSR_DTYPE_* */
    uint32_t rank;
    int64_t *dims;      /* dims[0] of a run-time size: its current value (0 until set) */
    int64_t size;
    int64_t size_symbol; /* the symbol whose value is dims[0] (a run-time size), or -1 */
    int64_t row_cells;   /* with size_symbol: the cells of one index of dims[0] */
    double fill, shift; /* fill: FILL's value, or UNIFORM's and NORMAL's scale */
    uint64_t value_count;
    const unsigned char *values; /* f32 little-endian, inside the image */
} Buffer;

/* A data item.  For `tokens`: `count` is 0 for sequential windows, 1 for random ones, whose
 * tokens the state keeps (`tokens`, read when the state is made, freed with it) so that SHUFFLE
 * can draw new windows; `path` is the file it read them from (a --data file replaces it). */
typedef struct DataSet {
    char *generator, *path, *name;
    int64_t count, seed;
    double noise, factor;
    int64_t bound;      /* > 0: every value a whole number in 0 … bound-1 (image_format.h, version 12) */
    uint8_t sharded;    /* split among the processes of a distributed run by samples: the number
                         * of leading axes that number them (0: not split; version 13) */
    uint32_t field_count;
    uint32_t *fields;
    tsr_tokens tokens;
} DataSet;

typedef struct PrintArg {
    uint8_t kind;
    int64_t i;
    double f;
    uint32_t ref;
} PrintArg;

typedef struct Print {
    char *format, *label;
    uint8_t grid;
    uint32_t arg_count;
    PrintArg *args;
} Print;

struct tsr_model {
    char *module;
    uint64_t program_hash; /* of the program compiled into the image (its version 23): distributed runs compare it */
    uint32_t symbol_count;
    char **symbol_names;
    int64_t *symbol_ranges;    /* an index symbol's range; a size symbol's least value */
    uint8_t *symbol_sizes;     /* a run-time size (image version 8) */
    uint32_t *symbol_leaders;  /* a size symbol's class's first */
    char **size_files;         /* per symbol: "data 'NAME' file 'PATH'" that set this run-time
                                * size from its length, or NULL (made by the state's data files) */
    uint32_t buffer_count;
    Buffer *buffers;
    uint32_t data_count;
    DataSet *data;
    uint32_t print_count;
    Print *prints;
    uint32_t option_count;
    tsr_option *options; /* the program's `option` items; `value` is the run's value */
    uint32_t action_count;
    tsr_action *actions; /* the statements of main that steps.c runs */
    uint32_t series_count;
    tsr_series *series;  /* what RECORD has appended so far, one per series number */
    tsr_gpu_section *gpu; /* the GPU section, or NULL (a CPU program) */
    tsr_gpu *device;      /* the state's device side (cuda.c), or NULL */
    char *save_path;      /* an executable's --save PATH: tsr_main_end saves there, or NULL */
    bool reduce_ordered;  /* --reduce=ordered: REDUCE takes the mean in rank order */
    bool check_replicas;  /* --check-replicas: tsr_main_save compares the parameters first */
    bool loaded;          /* tsr_state_load (--load) read a checkpoint: the seed may be its */
    bool seed_given;      /* --seed N: a checkpoint's seed is not taken (checkpoint.c) */
};

#endif
