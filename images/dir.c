// SPDX-License-Identifier: MIT
/* An image directory and its inventory.img (which decides the framing of the rest). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "images/internal.h"
#include "inventory.pb-c.h"

int img_dir_open(const char *path, struct img_dir **out, struct img_err *err)
{
	struct img_inventory inv;
	struct img_dir *d;

	d = calloc(1, sizeof(*d));
	if (!d)
		return img_fail(err, path, 0, "out of memory");
	d->path = strdup(path);
	d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!d->path || d->fd < 0) {
		img_fail(err, path, 0, "cannot open image directory: %s", strerror(errno));
		goto fail;
	}
	/* The inventory's version tells whether the other files carry the common magic. */
	if (img_read_inventory(d, &inv, err))
		goto fail;
	d->img_version = inv.img_version;
	img_inventory_free(&inv);
	*out = d;
	return 0;
fail:
	img_dir_close(d);
	return -1;
}

void img_dir_close(struct img_dir *d)
{
	if (!d)
		return;
	if (d->fd >= 0)
		close(d->fd);
	free(d->path);
	free(d);
}

const char *img_dir_path(const struct img_dir *d)
{
	return d->path;
}

int img_dir_fd(const struct img_dir *d)
{
	return d->fd;
}

int img_read_inventory(struct img_dir *d, struct img_inventory *inv, struct img_err *err)
{
	InventoryEntry *ie = NULL;
	struct img_file f;
	size_t off;
	int ret = -1;

	memset(inv, 0, sizeof(*inv));
	if (img_file_open(d, "inventory.img", IMG_INVENTORY_MAGIC, &f, NULL, err))
		return -1;
	if (img_file_next_msg(&f, &inventory_entry__descriptor, true, (void **)&ie, &off, err) < 0)
		goto out;
	if (ie->img_version != 1 && ie->img_version != 2) {
		img_fail(err, f.name, off, "unsupported img_version %u (CRIU writes 1 or 2)", ie->img_version);
		goto out;
	}
	if (!ie->has_fdinfo_per_id || !ie->fdinfo_per_id) {
		img_fail(err, f.name, off, "dump without fdinfo_per_id is too old to restore");
		goto out;
	}
	inv->img_version = ie->img_version;
	inv->fdinfo_per_id = ie->fdinfo_per_id;
	inv->has_dump_uptime = ie->has_dump_uptime;
	inv->dump_uptime = ie->dump_uptime;
	if (ie->dump_criu_run_id && !(inv->criu_run_id = strdup(ie->dump_criu_run_id)))
		goto oom;
	if (ie->plugins_entry && ie->plugins_entry->n_plugins) {
		inv->plugins = calloc(ie->plugins_entry->n_plugins, sizeof(char *));
		if (!inv->plugins)
			goto oom;
		for (size_t i = 0; i < ie->plugins_entry->n_plugins; i++) {
			inv->plugins[i] = strdup(ie->plugins_entry->plugins[i]);
			if (!inv->plugins[i])
				goto oom;
			inv->nr_plugins++;
		}
	}
	ret = 0;
	goto out;
oom:
	img_fail(err, f.name, off, "out of memory");
	img_inventory_free(inv);
out:
	if (ie)
		inventory_entry__free_unpacked(ie, NULL);
	img_file_close(&f);
	return ret;
}

void img_inventory_free(struct img_inventory *inv)
{
	for (size_t i = 0; i < inv->nr_plugins; i++)
		free(inv->plugins[i]);
	free(inv->plugins);
	free(inv->criu_run_id);
	memset(inv, 0, sizeof(*inv));
}
