// xterm.js and its stylesheet, in a chunk of their own that the terminal tab loads.
import '@xterm/xterm/css/xterm.css';

export { FitAddon } from '@xterm/addon-fit';
export { Terminal as XTerm } from '@xterm/xterm';
