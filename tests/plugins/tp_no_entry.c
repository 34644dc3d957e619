/* tp_no_entry.c - a shared object without kiln_plugin_entry. */
int not_a_kiln_plugin(void);
int not_a_kiln_plugin(void)
{
    return 1;
}
