#!/bin/sh
# ZED's zedlet for nasforge, written to /etc/zfs/zed.d by nasforge-setup
# when it makes a pool. ZED runs every executable all-* zedlet for each
# event, with the event in ZEVENT_* variables; nasforge-setup turns the
# ones that need a person into alerts (mail, webhook, ntfy, or the log and
# the status file) and logs the rest.
case "${ZEVENT_SUBCLASS}" in
    checksum|io|data)
        # A failing disk raises these by the hundred: one alert an hour
        # for each pool, disk and kind, kept in ZED's own state file.
        . "${ZED_ZEDLET_DIR}/zed-functions.sh"
        zed_rate_limit "${ZEVENT_POOL};${ZEVENT_VDEV_GUID:-0};${ZEVENT_SUBCLASS};nasforge" 3600 || exit 0
        ;;
    statechange|resilver_start|resilver_finish|scrub_finish) ;;
    # history_event, config_sync, pool_import and the like: routine.
    *) exit 0 ;;
esac
exec /usr/local/sbin/nasforge-setup alert --zed
