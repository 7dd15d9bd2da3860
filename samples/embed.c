/* The shortest complete ferry program: a loader over a dataset (an image
 * folder, a list file, tar shards, IDX images: ferry_dataset_open tells them
 * apart), one epoch on the default device (the GPU when there is one, its
 * slots pinned), batch shapes printed.
 *   build/samples/embed PATH */
#include <stdio.h>
#include <string.h>

#include <ferry.h>

int main(int argc, char **argv)
{
    /* --help: the usage on stdout; anything but one path: on stderr, status 2. */
    int help = argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    if (argc != 2 || help || argv[1][0] == '-') {
        fprintf(help ? stdout : stderr, "usage: %s PATH   (DIR/<class>/<file>.png or "
                ".jpg, a list file, tar shards or IDX images)\n", argv[0]);
        return help ? 0 : 2;
    }
    ferry_dataset *ds;
    ferry_loader *loader = NULL;
    if (ferry_dataset_open(argv[1], NULL, &ds) == FERRY_OK) {
        ferry_loader_config cfg = {.dataset = ds, .batch_size = 256, .shuffle = true};
        ferry_loader_create(&cfg, &loader);
        ferry_dataset_release(ds); /* the loader keeps its own reference */
    }
    if (!loader) {
        fprintf(stderr, "embed: %s\n", ferry_last_error());
        return 1;
    }
    char dev[FERRY_DEVICE_NAME_MAX];
    printf("device: %s\n", ferry_device_format(ferry_loader_device(loader), dev, sizeof dev));

    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(loader, NULL, &b)) == FERRY_OK) {
        const int64_t *s = ferry_tensor_shape(b.images);
        printf("batch %zu: images [%lld, %lld, %lld, %lld] %s, labels [%lld]\n", b.index,
               (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3],
               ferry_dtype_name(ferry_tensor_dtype(b.images)), (long long)b.size);
    }
    if (st != FERRY_END)
        fprintf(stderr, "embed: %s\n", ferry_last_error());
    ferry_loader_destroy(loader);
    return st == FERRY_END ? 0 : 1;
}
