/// The release every groser binary reports with `--version`, kept in one
/// place so groserd, groser-client and groser-bench cannot disagree.
public enum GroserRelease {
    /// "0.1.0".
    public static let version = "0.1.0"
}
